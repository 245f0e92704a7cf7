package pgstore

import (
	"strconv"
	"testing"
)

// TestTokenCacheGenerations: what a lookup found is remembered only if
// nothing was invalidated between its reading the generation (before
// its query) and its insertion, and only while a listener is connected.
func TestTokenCacheGenerations(t *testing.T) {
	c := newTokenCache()
	ref := memberRef{team: "demo", member: "reader"}

	_, _, gen := c.get("h1")
	c.put("h1", ref, gen)
	if _, ok, _ := c.get("h1"); ok {
		t.Fatal("remembered a lookup while no listener was connected")
	}

	// A query begun before the listener connected may have read a row
	// whose deletion nobody heard.
	_, _, gen = c.get("h1")
	c.connected()
	c.put("h1", ref, gen)
	if _, ok, _ := c.get("h1"); ok {
		t.Fatal("remembered a lookup whose query began before the listener connected")
	}

	// The race: the query reads the member, the team's deletion is
	// heard, then the lookup would insert.
	_, _, gen = c.get("h1")
	c.forgetTeam("demo")
	c.put("h1", ref, gen)
	if _, ok, _ := c.get("h1"); ok {
		t.Fatal("remembered a lookup that read the member before its team's deletion was heard")
	}

	// Any other team's deletion counts too: the check is one counter.
	_, _, gen = c.get("h1")
	c.put("h1", ref, gen)
	got, ok, _ := c.get("h1")
	if !ok || got != ref {
		t.Fatalf("get after put = %+v, %v; want %+v", got, ok, ref)
	}
	c.put("h2", memberRef{team: "kept", member: "lead"}, gen)
	c.forgetTeam("demo")
	if _, ok, _ := c.get("h1"); ok {
		t.Error("the deleted team's token is still remembered")
	}
	if _, ok, _ := c.get("h2"); !ok {
		t.Error("another team's token was forgotten with the deleted team")
	}

	c.lost()
	if n := c.size(); n != 0 {
		t.Fatalf("%d tokens remembered after the listener was lost, want 0", n)
	}
	_, _, gen = c.get("h2")
	c.put("h2", memberRef{team: "kept", member: "lead"}, gen)
	if n := c.size(); n != 0 {
		t.Fatalf("%d tokens remembered with no listener, want 0", n)
	}
}

// TestTokenCacheBound: the cache never holds more than maxTokens; filling
// it starts it afresh.
func TestTokenCacheBound(t *testing.T) {
	c := newTokenCache()
	c.connected()
	_, _, gen := c.get("")
	for i := range maxTokens {
		c.put(strconv.Itoa(i), memberRef{team: "t" + strconv.Itoa(i%100), member: "lead"}, gen)
	}
	if n := c.size(); n != maxTokens {
		t.Fatalf("%d tokens remembered, want %d", n, maxTokens)
	}
	c.put("one more", memberRef{team: "x", member: "lead"}, gen)
	if n := c.size(); n != 1 {
		t.Fatalf("%d tokens remembered after the bound was passed, want 1", n)
	}
	c.forgetTeam("t1") // byTeam was cleared with the entries: nothing stale is left to drop
	if _, ok, _ := c.get("one more"); !ok {
		t.Fatal("the token added after the bound was lost")
	}
}
