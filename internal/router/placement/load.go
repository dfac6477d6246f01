package placement

import (
	"encoding/binary"
	"math"
)

// Load is what one gateway has in flight at one endpoint: requests sent
// and not ended, those of them not yet at their first token, the uncached
// prompt tokens those still owe (the prefill ahead of anything sent there
// next), and the critical requests past their first token (streams that
// other classes' long prompts keep away from). A gateway that weighs an
// endpoint by its own requests alone sees half of it when a second
// gateway sends there as much; with the others' loads it routes as one
// gateway would.
type Load struct {
	Pool, Endpoint                    string
	Inflight, Pending, Owed, Critical int64
}

// A load message is version, the sending gateway's id, then one record per
// endpoint where the sender has something in flight: Pool and Endpoint
// (each a uvarint length and its bytes), then Inflight, Pending, Owed and
// Critical (uvarints). A message is the sender's whole load: an endpoint
// it leaves out has nothing of the sender's in flight.

// appendLoad appends l to a load message.
func appendLoad(b []byte, l Load) []byte {
	b = binary.AppendUvarint(b, uint64(len(l.Pool)))
	b = append(b, l.Pool...)
	b = binary.AppendUvarint(b, uint64(len(l.Endpoint)))
	b = append(b, l.Endpoint...)
	b = binary.AppendUvarint(b, uint64(max(l.Inflight, 0)))
	b = binary.AppendUvarint(b, uint64(max(l.Pending, 0)))
	b = binary.AppendUvarint(b, uint64(max(l.Owed, 0)))
	return binary.AppendUvarint(b, uint64(max(l.Critical, 0)))
}

// decodeLoads appends the records of a load message to loads and returns
// them with the sender's id; a message from self gives none and ok true.
// A malformed message, or one of another version, gives ok false and no
// records. It reads the wire alone: whether the counts are ones a gateway
// could have is for the receiving gateway to judge (Gateway.PeerLoads).
func decodeLoads(msg []byte, self uint64, loads []Load) (sender uint64, out []Load, ok bool) {
	if len(msg) < headerLen || msg[0] != version {
		return 0, loads, false
	}
	sender = binary.LittleEndian.Uint64(msg[1:])
	if sender == self {
		return sender, loads, true
	}
	n := len(loads)
	for b := msg[headerLen:]; len(b) > 0; {
		var l Load
		var okPool, okEndpoint, okCounts bool
		l.Pool, okPool = str(&b)
		l.Endpoint, okEndpoint = str(&b)
		var c [4]int64
		c, okCounts = counts(&b)
		l.Inflight, l.Pending, l.Owed, l.Critical = c[0], c[1], c[2], c[3]
		if !okPool || !okEndpoint || !okCounts {
			return sender, loads[:n], false
		}
		loads = append(loads, l)
	}
	return sender, loads, true
}

// counts takes a record's four counts off the front of *b. Each must be
// at most MaxInt32, well short of overflowing an int64 when the gateways'
// are summed.
func counts(b *[]byte) (v [4]int64, ok bool) {
	for i := range v {
		u, ok := uvarint(b)
		if !ok || u > math.MaxInt32 {
			return v, false
		}
		v[i] = int64(u)
	}
	return v, true
}
