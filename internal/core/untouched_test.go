package core

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestUntouchedKnowsEveryField: untouched, diffState's comparison without
// reflection, names every field of the team and its members (a new field
// fails here until untouched compares it and this list names it), an
// unchanged unit copy is untouched, and a change to any one field of the
// team or of a member is seen.
func TestUntouchedKnowsEveryField(t *testing.T) {
	known := map[reflect.Type][]string{
		reflect.TypeFor[TeamState](): {"Name", "CreatedAt", "Limits", "Members", "Requests", "Purpose", "Model",
			"Workspace", "HostPermission", "Permissions", "Reservations", "ReservationSeq", "Acks"},
		reflect.TypeFor[MemberState](): {"Name", "Role", "Status", "Turns", "History", "TokenHash", "Usage",
			"ModelRequests", "Lease", "Model", "Wake", "WakeHeld", "WakeHeldReason", "Attended", "Skills", "Archive"},
	}
	for typ, want := range known {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("fields of %s = %v, want %v: compare a new field in untouched (changeset.go), then name it here", typ.Name(), got, want)
		}
	}

	base := &TeamState{}
	fill(reflect.ValueOf(base).Elem(), 0)
	// untouched leaves pending requests and permissions to diffState's
	// deep comparison.
	base.Requests, base.Permissions = nil, nil
	if !untouched(base, base.UnitCopy()) {
		t.Fatal("untouched(base, base.UnitCopy()) = false, want true")
	}
	if st, leases := diffState(base, base.UnitCopy()); st != nil || leases != nil {
		t.Fatalf("diffState of an unchanged copy = %v, %v; want nil, nil", st, leases)
	}
	team := reflect.ValueOf(base).Elem().Type()
	for i := range team.NumField() {
		c := base.UnitCopy()
		change(reflect.ValueOf(c).Elem().Field(i))
		if untouched(base, c) {
			t.Errorf("TeamState.%s changed: untouched = true, want false", team.Field(i).Name)
		}
	}
	member := reflect.TypeFor[MemberState]()
	for i := range member.NumField() {
		c := base.UnitCopy()
		change(reflect.ValueOf(&c.Members[1]).Elem().Field(i))
		if untouched(base, c) {
			t.Errorf("MemberState.%s of the second member changed: untouched = true, want false", member.Field(i).Name)
		}
	}
}

// fill gives every exported field under v a value that is not its zero:
// one element in each slice (two members), a pointer to a filled value.
func fill(v reflect.Value, depth int) {
	if depth > 6 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("a")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		n := 1
		if v.Type() == reflect.TypeFor[[]MemberState]() {
			n = 2
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0).UTC()))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), depth+1)
		}
	}
}

// change gives v another value, as a unit of work would: a slice gains an
// element, a pointer points to a new value, a struct's first field changes.
func change(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		if t, ok := v.Interface().(time.Time); ok {
			v.Set(reflect.ValueOf(t.Add(time.Second)))
			return
		}
		change(v.Field(0))
	default:
		panic("change: no rule for " + v.Type().String())
	}
}
