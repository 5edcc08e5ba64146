package lanequeue

import (
	"math/rand/v2"
	"testing"
)

// FuzzQueue drives the property driver (see property_test.go) with fuzz
// input: each byte is one choice, so any input is a valid scenario and a
// failing input replays exactly.
func FuzzQueue(f *testing.F) {
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		b := make([]byte, 64+seed*64)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2<<10 { // about a thousand steps
			data = data[:2<<10]
		}
		runProperties(t, &byteSource{data: data})
	})
}
