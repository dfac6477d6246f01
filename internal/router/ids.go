package router

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// randomPrefix is 8 random bytes in hex and a dash: a process's share of
// the request id space.
func randomPrefix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "-"
}

func formatCounter(n uint64) string { return strconv.FormatUint(n, 36) }
