//go:build !linux

package proxy

// Elsewhere than Linux the kernel's count of unread bytes is not asked
// (frameread.go): frames are read as they arrive.

const canQueryQueue = false

func unreadBytesOf(uintptr) int { return 0 }
