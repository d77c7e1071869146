package httpapi

import (
	"bytes"
	"image/png"
	"testing"

	go_qr "github.com/piglig/go-qr"
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

func BenchmarkDrawQR2048(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := drawQR("https://sho.rt/Ab3dE6gH9k", "png", MaxQRSize); err != nil {
			b.Fatal(err)
		}
	}
}
