package proxy

// The kernel's count of a socket's unread bytes on Linux (frameread.go).

import "golang.org/x/sys/unix"

const canQueryQueue = true

// unreadBytesOf is the bytes the kernel holds unread for socket fd
// (SIOCINQ); 0 when it cannot tell, which only costs the reads it saves.
func unreadBytesOf(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
