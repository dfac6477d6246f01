// Package placement tells the gateways in front of the same pools where
// each of them sent a prompt, so that every one routes by what all of them
// have sent. Each gateway keeps its own prefix index of the prompt blocks
// its pools' endpoints hold; without this, a conversation whose turns
// reach two gateways is placed by each as if the other did not exist, and
// its prefix is computed twice.
//
// A placement is advisory: one that is lost costs a cache miss, never a
// wrong answer. So placements are sent off the request path, in batches,
// and dropped (and counted) rather than waited for when the bus is slow.
//
// The gateways also tell each other their loads (Load): what each has in
// flight at each endpoint, so that each predicts a first token by every
// gateway's requests there and not by its own alone.
package placement

import (
	"encoding/binary"
	"errors"
)

// Placement is one call's mark on a pool's prefix index: the endpoint
// named Endpoint of the pool named Pool holds the prompt blocks whose
// chained hashes are Hashes, or with Drop does not hold them.
type Placement struct {
	Pool, Endpoint string
	// Block is the bytes of prompt text to one block. Hashes of another
	// block size name other blocks, so a gateway whose index uses another
	// size ignores the placement.
	Block  int
	Drop   bool
	Hashes []uint64
}

// version is the first byte of every message. A gateway ignores messages
// of another version, so gateways of two versions side by side during an
// upgrade route as if alone rather than misread each other.
const version = 1

// A message is version, the sending gateway's id (8 bytes), then one or
// more records, each: flags (1 byte; bit 0: Drop), Block (uvarint), Pool
// and Endpoint (each a uvarint length and its bytes), the number of
// hashes (uvarint) and the hashes (8 bytes each, little endian).
const headerLen = 1 + 8

const flagDrop = 1

var (
	errMalformed = errors.New("placement: malformed message")
	errTooLarge  = errors.New("placement: message longer than any gateway sends")
)

// appendHeader starts a message from sender.
func appendHeader(b []byte, sender uint64) []byte {
	b = append(b, version)
	return binary.LittleEndian.AppendUint64(b, sender)
}

// appendRecord appends p to a message.
func appendRecord(b []byte, p Placement) []byte {
	var flags byte
	if p.Drop {
		flags |= flagDrop
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(max(p.Block, 0)))
	b = binary.AppendUvarint(b, uint64(len(p.Pool)))
	b = append(b, p.Pool...)
	b = binary.AppendUvarint(b, uint64(len(p.Endpoint)))
	b = append(b, p.Endpoint...)
	b = binary.AppendUvarint(b, uint64(len(p.Hashes)))
	for _, h := range p.Hashes {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return b
}

// recordLen is how many bytes appendRecord appends for p, at most.
func recordLen(p Placement) int {
	return 1 + 4*binary.MaxVarintLen64 + len(p.Pool) + len(p.Endpoint) + 8*len(p.Hashes)
}

// decode calls fn with each record of msg, in order, unless msg is from
// self or of another version. The Placement fn gets, and its Hashes, are
// valid only during the call. A malformed message is an error; the
// records before the fault have been given to fn.
func decode(msg []byte, self uint64, scratch []uint64, fn func(Placement)) ([]uint64, error) {
	if len(msg) < headerLen || msg[0] != version {
		return scratch, errMalformed
	}
	if binary.LittleEndian.Uint64(msg[1:]) == self {
		return scratch, nil
	}
	b := msg[headerLen:]
	for len(b) > 0 {
		var p Placement
		p.Drop = b[0]&flagDrop != 0
		b = b[1:]
		block, ok := uvarint(&b)
		if !ok || block > 1<<30 {
			return scratch, errMalformed
		}
		p.Block = int(block)
		if p.Pool, ok = str(&b); !ok {
			return scratch, errMalformed
		}
		if p.Endpoint, ok = str(&b); !ok {
			return scratch, errMalformed
		}
		n, ok := uvarint(&b)
		if !ok || n > uint64(len(b))/8 {
			return scratch, errMalformed
		}
		scratch = scratch[:0]
		for i := range int(n) {
			scratch = append(scratch, binary.LittleEndian.Uint64(b[8*i:]))
		}
		b = b[8*n:]
		p.Hashes = scratch
		fn(p)
	}
	return scratch, nil
}

// uvarint takes a uvarint off the front of *b.
func uvarint(b *[]byte) (uint64, bool) {
	v, n := binary.Uvarint(*b)
	if n <= 0 {
		return 0, false
	}
	*b = (*b)[n:]
	return v, true
}

// str takes a length-prefixed string off the front of *b.
func str(b *[]byte) (string, bool) {
	n, ok := uvarint(b)
	if !ok || n > uint64(len(*b)) {
		return "", false
	}
	s := string((*b)[:n])
	*b = (*b)[n:]
	return s, true
}
