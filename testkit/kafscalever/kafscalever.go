// Package kafscalever holds the ApiVersions table KafScale's brokers
// answer, as seen through a proxy with `kcat -d protocol` (July 2026), for
// tests of how kproxy serves clients of a pool that speaks these ranges
// only. It is data, not a claim about any later KafScale release.
package kafscalever

import "github.com/twmb/franz-go/pkg/kmsg"

// Versions returns the table: supported keys with their ranges, and keys
// KafScale lists as unsupported with -1/-1. The caller owns the slice.
func Versions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4}, {ApiKey: 3, MinVersion: 0, MaxVersion: 12},
		{ApiKey: 0, MinVersion: 0, MaxVersion: 9}, {ApiKey: 1, MinVersion: 11, MaxVersion: 13},
		{ApiKey: 10, MinVersion: 3, MaxVersion: 3}, {ApiKey: 2, MinVersion: 0, MaxVersion: 4},
		{ApiKey: 11, MinVersion: 4, MaxVersion: 4}, {ApiKey: 14, MinVersion: 4, MaxVersion: 4},
		{ApiKey: 12, MinVersion: 4, MaxVersion: 4}, {ApiKey: 13, MinVersion: 4, MaxVersion: 4},
		{ApiKey: 8, MinVersion: 3, MaxVersion: 3}, {ApiKey: 9, MinVersion: 5, MaxVersion: 5},
		{ApiKey: 15, MinVersion: 5, MaxVersion: 5}, {ApiKey: 16, MinVersion: 0, MaxVersion: 5},
		{ApiKey: 23, MinVersion: 3, MaxVersion: 3}, {ApiKey: 32, MinVersion: 4, MaxVersion: 4},
		{ApiKey: 33, MinVersion: 1, MaxVersion: 1}, {ApiKey: 37, MinVersion: 0, MaxVersion: 3},
		{ApiKey: 19, MinVersion: 0, MaxVersion: 2}, {ApiKey: 20, MinVersion: 0, MaxVersion: 2},
		{ApiKey: 42, MinVersion: 0, MaxVersion: 2},
		{ApiKey: 4, MinVersion: -1, MaxVersion: -1}, {ApiKey: 5, MinVersion: -1, MaxVersion: -1},
		{ApiKey: 6, MinVersion: -1, MaxVersion: -1}, {ApiKey: 7, MinVersion: -1, MaxVersion: -1},
		{ApiKey: 21, MinVersion: -1, MaxVersion: -1}, {ApiKey: 22, MinVersion: -1, MaxVersion: -1},
		{ApiKey: 24, MinVersion: -1, MaxVersion: -1}, {ApiKey: 25, MinVersion: -1, MaxVersion: -1},
		{ApiKey: 26, MinVersion: -1, MaxVersion: -1},
	}
}
