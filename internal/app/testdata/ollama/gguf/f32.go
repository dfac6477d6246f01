package main

import (
	"encoding/binary"
	"io"
	"math"
)

// f32 writes its values as GGUF's little-endian F32 data.
type f32 []float32

func (v f32) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
	}
	n, err := w.Write(buf)
	return int64(n), err
}
