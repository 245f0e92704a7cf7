package globs

// Prefixes returns the literal starts of p: every path p matches begins
// with one of them, and two patterns can overlap only when a start of one
// begins with a start of the other. A caller holding many patterns can
// index them by these strings and ask Overlaps or Match only of the
// patterns whose starts meet, which is what makes a grant against hundreds
// of reservations cheap. The slice is p's own; it must not be changed.
func (p *Pattern) Prefixes() []string { return p.m.prefixes }
