package core

import "testing"

// TestArchiveMarkLastRead: the last letter read is named by the cursor's
// position through the mark, and stays named when the cursor stands on a
// kept letter or at 0 after everything read was archived.
func TestArchiveMarkLastRead(t *testing.T) {
	for _, tt := range []struct {
		name string
		mark *ArchiveMark
		pos  int
		want int
	}{
		{"NoMarkNothingRead", nil, 0, 0},
		{"NoMark", nil, 3, 3},
		{"AllReadArchived", &ArchiveMark{Through: 4}, 0, 4},
		{"AfterTheMark", &ArchiveMark{Through: 4}, 2, 6},
		{"OnAKeptLetter", &ArchiveMark{Through: 5, Kept: []int{2}}, 1, 5},
		{"PastTheKeptLetters", &ArchiveMark{Through: 5, Kept: []int{2, 3}}, 3, 6},
	} {
		if got := tt.mark.LastRead(tt.pos); got != tt.want {
			t.Errorf("%s: %+v.LastRead(%d) = %d, want %d", tt.name, tt.mark, tt.pos, got, tt.want)
		}
	}
}
