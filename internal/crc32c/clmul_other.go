//go:build !amd64

// This file is update where no vector fold is written (clmul_amd64.go).

package crc32c

import "hash/crc32"

func update(sum uint32, b []byte) uint32 { return crc32.Update(sum, castagnoli, b) }
