package placement

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var loads = []Load{
	{Pool: "main", Endpoint: "gpu-0", Inflight: 12, Pending: 3, Owed: 4096, Critical: 2},
	{Pool: "main", Endpoint: "http://10.0.0.7:8000/v1", Inflight: 1},
	{Pool: "ümlaut pool", Endpoint: "", Inflight: math.MaxInt32, Pending: math.MaxInt32, Owed: math.MaxInt32},
}

func loadMessage(sender uint64, ls ...Load) []byte {
	b := appendHeader(nil, sender)
	for _, l := range ls {
		b = appendLoad(b, l)
	}
	return b
}

func TestLoadRoundTrip(t *testing.T) {
	for _, sent := range [][]Load{loads, nil} {
		from, got, ok := decodeLoads(loadMessage(7, sent...), 8, nil)
		if !ok || from != 7 {
			t.Fatalf("decoded from %d, ok %v; want from 7, ok", from, ok)
		}
		if diff := cmp.Diff(sent, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("decoded (-want +got):\n%s", diff)
		}
	}
	if _, got, ok := decodeLoads(loadMessage(7, loads...), 7, nil); !ok || len(got) != 0 {
		t.Errorf("own message: %d loads, ok %v; want none, ok", len(got), ok)
	}
}

// TestMalformedLoads: a message cut inside a record, of another version,
// or with a count past MaxInt32 gives no loads at all: a message is a
// gateway's whole load, so a part of one would be read as the rest having
// ended. Counts no gateway has, but that the wire can carry, are the
// receiving gateway's to refuse.
func TestMalformedLoads(t *testing.T) {
	msg := loadMessage(7, loads[:2]...)
	ends := map[int]bool{headerLen: true, len(loadMessage(7, loads[0])): true, len(msg): true}
	for n := range len(msg) {
		_, got, ok := decodeLoads(msg[:n], 8, nil)
		if ok != ends[n] {
			t.Errorf("cut at %d: ok %v, want %v", n, ok, ends[n])
		}
		if !ok && len(got) != 0 {
			t.Errorf("cut at %d: %d loads from a malformed message", n, len(got))
		}
	}
	other := bytes.Clone(msg)
	other[0] = version + 1
	for name, bad := range map[string][]byte{
		"another version":   other,
		"a count too large": loadMessage(7, Load{Pool: "p", Endpoint: "e", Inflight: math.MaxInt32 + 1}),
		"owed too large":    loadMessage(7, Load{Pool: "p", Endpoint: "e", Inflight: 1, Pending: 1, Owed: math.MaxInt32 + 1}),
	} {
		if _, got, ok := decodeLoads(bad, 8, []Load{{Pool: "kept"}}); ok || len(got) != 1 {
			t.Errorf("%s: ok %v with %d loads; want not ok, and only what was there before", name, ok, len(got))
		}
	}
}

// FuzzDecodeLoads: no input makes decodeLoads panic, what it accepts has
// counts from 0 to MaxInt32, and it encodes back to the same loads.
func FuzzDecodeLoads(f *testing.F) {
	f.Add(loadMessage(7, loads...))
	f.Add(loadMessage(7))
	f.Add([]byte{version})
	f.Fuzz(func(t *testing.T, msg []byte) {
		from, got, ok := decodeLoads(msg, 0, nil)
		if !ok || len(msg) < headerLen || binary.LittleEndian.Uint64(msg[1:]) == 0 {
			return
		}
		for _, l := range got {
			if min(l.Inflight, l.Pending, l.Owed, l.Critical) < 0 ||
				max(l.Inflight, l.Pending, l.Owed, l.Critical) > math.MaxInt32 {
				t.Fatalf("accepted %+v", l)
			}
		}
		_, back, ok := decodeLoads(loadMessage(from, got...), 0, nil)
		if !ok {
			t.Fatal("the re-encoded message is malformed")
		}
		if diff := cmp.Diff(got, back, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("decode(encode(decode(msg))) differs (-first +second):\n%s", diff)
		}
	})
}
