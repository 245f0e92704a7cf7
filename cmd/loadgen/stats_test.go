package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(n ...int) latencies {
		var l latencies
		for _, v := range n {
			l = append(l, time.Duration(v)*time.Millisecond)
		}
		return l
	}
	tests := []struct {
		name string
		l    latencies
		p    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd count", ms(5, 1, 3), 0.5, 3 * time.Millisecond},
		{"median of even count is the lower", ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"p100 is the maximum", ms(2, 9, 4), 1, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.pct(tt.p); got != tt.want {
				t.Errorf("pct(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestPercentileLeavesSampleUnsorted(t *testing.T) {
	l := latencies{3, 1, 2}
	l.pct(0.5)
	if l[0] != 3 || l[1] != 1 || l[2] != 2 {
		t.Errorf("pct reordered its sample: %v", l)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}
