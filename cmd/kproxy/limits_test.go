package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestLimitsLeaveTheLargestFrame: --queued-max-request-bytes, less its
// small-frame reserve (an eighth, at most 8 MiB), must hold a frame of
// --max-frame-bytes, or the largest frames could never be read.
func TestLimitsLeaveTheLargestFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error; "" for none
	}{
		{"defaults", nil, ""},
		{"budget just above the frame and reserve", []string{"--queued-max-request-bytes", "113246208"}, ""}, // 108 MiB
		{"budget equal to the frame", []string{"--queued-max-request-bytes", "104857600"}, "small-frame reserve of 8388608"},
		{"small budget and frame", []string{"--queued-max-request-bytes", "1048576", "--max-frame-bytes", "917505"}, "below --max-frame-bytes 917505"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			app := &cli.App{
				Flags: append(limitFlags(), intFlag("max-frame-bytes", 100<<20, "")),
				Action: func(c *cli.Context) error {
					_, err = limitsFrom(c)
					return nil
				},
			}
			if rerr := app.Run(append([]string{"kproxy"}, tc.args...)); rerr != nil {
				t.Fatal(rerr)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}
