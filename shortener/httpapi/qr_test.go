package httpapi

import (
	"bytes"
	"context"
	"image/png"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	go_qr "github.com/piglig/go-qr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
)

// The hand-written PNG is what image/png reads back, pixel for pixel the
// QR code's modules, at every scale (odd widths included).
func TestQRPNGPixels(t *testing.T) {
	const text = "https://sho.rt/Ab3dE6gH9k"
	qr, err := go_qr.EncodeText(text, go_qr.Medium)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{MinQRSize, 100, DefaultQRSize, 333, MaxQRSize} {
		img, err := drawQR(text, "png", size)
		if err != nil {
			t.Fatal(err)
		}
		m, err := png.Decode(bytes.NewReader(img.body))
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		modules := qr.Size() + 2*qrBorder
		scale := max(1, size/modules)
		if b := m.Bounds(); b.Dx() != modules*scale || b.Dy() != modules*scale || b.Dx() > max(size, modules) {
			t.Fatalf("size %d: image %v, want %d pixels a side", size, b, modules*scale)
		}
		for y := range modules * scale {
			for x := range modules * scale {
				r, _, _, _ := m.At(x, y).RGBA()
				if dark := r == 0; dark != qr.Module(x/scale-qrBorder, y/scale-qrBorder) {
					t.Fatalf("size %d: pixel (%d,%d) dark=%v, module says otherwise", size, x, y, dark)
				}
			}
		}
	}
}

// At most renders draws run at once; the other requests wait their turn,
// and give up with 503 unavailable when their deadline passes first.
func TestQRRendersBounded(t *testing.T) {
	q, err := newQRCodes(DefaultQRCacheBytes, 2, prometheus.NewCounter(prometheus.CounterOpts{Name: "draws"}))
	if err != nil {
		t.Fatal(err)
	}
	var running, peak atomic.Int32
	release := make(chan struct{})
	q.draw = func(text, format string, size int) (qrImage, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		return drawQR(text, format, size)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, err := q.get(context.Background(), "https://sho.rt/"+strconv.Itoa(i), "png", 512); err != nil {
				t.Error(err)
			}
		})
	}
	for running.Load() < 2 {
		runtime.Gosched()
	}
	// A request whose deadline passes while it waits gets 503.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := q.get(ctx, "https://sho.rt/late", "png", 512); shortener.ErrorCode(err) != shortener.Unavailable {
		t.Errorf("waiting past the deadline: %v, want unavailable", err)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Errorf("%d draws ran at once, want 2", p)
	}
}

func BenchmarkDrawQR2048(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := drawQR("https://sho.rt/Ab3dE6gH9k", "png", MaxQRSize); err != nil {
			b.Fatal(err)
		}
	}
}
