package placement

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var records = []Placement{
	{Pool: "main", Endpoint: "gpu-0", Block: 256, Hashes: []uint64{1, 2, 1 << 63}},
	{Pool: "main", Endpoint: "http://10.0.0.7:8000/v1", Block: 256, Drop: true, Hashes: []uint64{42}},
	{Pool: "ümlaut pool", Endpoint: "", Block: 0},
}

func message(sender uint64, ps ...Placement) []byte {
	b := appendHeader(nil, sender)
	for _, p := range ps {
		b = appendRecord(b, p)
	}
	return b
}

// decoded is every record of msg as another gateway than self reads it.
func decoded(t *testing.T, msg []byte, self uint64) ([]Placement, error) {
	t.Helper()
	var got []Placement
	_, err := decode(msg, self, nil, func(p Placement) {
		p.Hashes = slices.Clone(p.Hashes)
		got = append(got, p)
	})
	return got, err
}

func TestRoundTrip(t *testing.T) {
	msg := message(7, records...)
	got, err := decoded(t, msg, 8)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(records, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	for _, p := range records {
		if n := len(appendRecord(nil, p)); n > recordLen(p) {
			t.Errorf("record of %q is %d bytes, over recordLen %d", p.Endpoint, n, recordLen(p))
		}
	}
}

func TestOwnMessagesAreSkipped(t *testing.T) {
	got, err := decoded(t, message(7, records...), 7)
	if err != nil || len(got) != 0 {
		t.Errorf("own message: %d records, error %v; want none and no error", len(got), err)
	}
}

// TestMalformed: a message cut anywhere inside a record, or of another
// version, is an error, and what came before the fault is whole.
func TestMalformed(t *testing.T) {
	msg := message(7, records[:2]...)
	first := len(message(7, records[0]))
	for n := range len(msg) {
		got, err := decoded(t, msg[:n], 8)
		switch {
		case n == headerLen || n == first:
			// A whole number of records.
			if err != nil {
				t.Errorf("cut at %d, a record's end: %v", n, err)
			}
		case err == nil:
			t.Errorf("cut at %d: no error", n)
		}
		for i, p := range got {
			if !cmp.Equal(p, records[i]) {
				t.Errorf("cut at %d: record %d is %+v, want %+v", n, i, p, records[i])
			}
		}
	}
	other := bytes.Clone(msg)
	other[0] = version + 1
	if got, err := decoded(t, other, 8); err == nil || len(got) != 0 {
		t.Errorf("another version: %d records, error %v; want none and an error", len(got), err)
	}
}

// FuzzDecode: no input makes decode panic, and what it decodes encodes
// back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(message(7, records...))
	f.Add(message(7))
	f.Add([]byte{version})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var got []Placement
		_, err := decode(msg, 0, nil, func(p Placement) {
			p.Hashes = slices.Clone(p.Hashes)
			got = append(got, p)
		})
		if err != nil || len(msg) < headerLen {
			return
		}
		sender := binary.LittleEndian.Uint64(msg[1:])
		if sender == 0 {
			// Sent by "self", skipped.
			return
		}
		again := appendHeader(nil, sender)
		for _, p := range got {
			again = appendRecord(again, p)
		}
		// Flags other than Drop and non-minimal varints are read but not
		// written back, so compare what they mean.
		back, err := decoded(t, again, 0)
		if err != nil {
			t.Fatalf("re-encoded message: %v", err)
		}
		if diff := cmp.Diff(got, back, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("decode(encode(decode(msg))) differs (-first +second):\n%s", diff)
		}
	})
}
