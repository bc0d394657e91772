// Package commalist splits the comma-separated values of flags and settings
// ("a, b,,c"): each element trimmed of spaces, empty ones dropped. It does
// not quote or escape: an element cannot contain a comma.
package commalist

import "strings"

// Split returns the non-empty, trimmed elements of s in order (nil for none).
func Split(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
