package scale

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStormErr checks that a storm reads as a success only when every record
// was acknowledged, and that a hang is named as one with its counts.
func TestStormErr(t *testing.T) {
	failure := errors.New("NOT_LEADER_FOR_PARTITION")
	for _, tc := range []struct {
		name  string
		storm Storm
		want  string // "" for no error
	}{
		{"all acknowledged", Storm{Records: 2, Acked: make([]Ack, 2)}, ""},
		{"failed", Storm{Records: 2, Acked: make([]Ack, 1), Failed: 1, FirstErr: failure},
			"1 of 2 records failed, first: NOT_LEADER_FOR_PARTITION"},
		{"unanswered", Storm{Records: 3, Acked: make([]Ack, 1), Failed: 1, FirstErr: failure, Unanswered: 1, Took: 95 * time.Second},
			"the producer hangs: 1 of 3 records unanswered 1m35s after they were sent (delivery timeout + 30s; 1 acknowledged, 1 failed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.storm.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Err() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Err() = %v, want %q", err, tc.want)
			}
			if tc.storm.FirstErr != nil && tc.storm.Unanswered == 0 && !errors.Is(err, failure) {
				t.Errorf("Err() = %v does not wrap the first failure", err)
			}
		})
	}
}
