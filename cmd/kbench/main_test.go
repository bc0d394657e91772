package main

import (
	"slices"
	"testing"
)

func TestParsePartitions(t *testing.T) {
	tests := []struct {
		in      string
		want    []int32
		wantErr bool
	}{
		{"", nil, false},
		{"0,1, 15", []int32{0, 1, 15}, false},
		{"3,,4", []int32{3, 4}, false},
		{"-1", nil, true},
		{"a", nil, true},
		{"99999999999", nil, true},
	}
	for _, tc := range tests {
		got, err := parsePartitions(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parsePartitions(%q) = %v, %v; want %v, error %t", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
