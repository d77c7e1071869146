package httpapi

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strconv"

	"github.com/maypok86/otter/v2"
	go_qr "github.com/piglig/go-qr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// QR codes of short links. A 2048-pixel image drawn the obvious way (an
// RGBA canvas, ~16 MiB, then PNG) costs ~31 MiB and 100+ ms of CPU, so
// 64 clients asking at once took the process to ~2 GB. Here an image is
// drawn once per (short link, format, size) onto a 1-byte-per-pixel
// two-colour canvas and kept, encoded, in a cache bounded in bytes; at
// most Config.QRRenders draws run at once, each waiting request holding
// nothing but its place, and concurrent requests for the same image share
// one draw. The QR code holds only the short link, which never changes,
// so an edit of the link's target does not touch the cache; a deleted
// link answers 404 before the cache is asked.

// QR code sizes, in pixels.
const (
	DefaultQRSize = 256
	MinQRSize     = 64
	MaxQRSize     = 2048
	qrBorder      = 4 // modules of quiet zone, as the standard asks
)

// Defaults of the QR cache and render bound.
const (
	DefaultQRCacheBytes = 32 << 20
	DefaultQRRenders    = 2
)

type qrImage struct {
	body        []byte
	contentType string
}

// qrCodes draws and caches QR images.
type qrCodes struct {
	cache   *otter.Cache[string, qrImage]
	renders chan struct{} // a token per draw in progress
	draws   prometheus.Counter
	draw    func(text, format string, size int) (qrImage, error) // drawQR; tests count
}

func newQRCodes(cacheBytes, renders int, draws prometheus.Counter) (*qrCodes, error) {
	c, err := otter.New(&otter.Options[string, qrImage]{
		MaximumWeight: uint64(cacheBytes),
		Weigher: func(k string, v qrImage) uint32 {
			return uint32(len(k) + len(v.body) + 64)
		},
	})
	if err != nil {
		return nil, err
	}
	return &qrCodes{cache: c, renders: make(chan struct{}, renders), draws: draws, draw: drawQR}, nil
}

var errQRBusy = &shortener.Error{Code: shortener.Unavailable, Message: "QR codes are being drawn for other requests, retry later"}

// get returns the image of text in format at size, drawing it unless
// cached. A draw waits for a free render slot until ctx ends.
func (q *qrCodes) get(ctx context.Context, text, format string, size int) (qrImage, error) {
	key := format + "\x00" + strconv.Itoa(size) + "\x00" + text
	return q.cache.Get(ctx, key, otter.LoaderFunc[string, qrImage](func(ctx context.Context, _ string) (qrImage, error) {
		select {
		case q.renders <- struct{}{}:
		case <-ctx.Done():
			return qrImage{}, errQRBusy
		}
		defer func() { <-q.renders }()
		q.draws.Inc()
		return q.draw(text, format, size)
	}))
}

// drawQR draws text as a QR code (error correction level M) in format, at
// most size pixels wide (whole pixels per module, so it may be a little
// smaller).
func drawQR(text, format string, size int) (qrImage, error) {
	qr, err := go_qr.EncodeText(text, go_qr.Medium)
	if err != nil {
		return qrImage{}, err
	}
	modules := qr.Size() + 2*qrBorder
	scale := max(1, size/modules)
	if format == "svg" {
		b, err := qr.ToSVGBytes(go_qr.NewQrCodeImgConfig(scale, qrBorder))
		return qrImage{b, "image/svg+xml"}, err
	}
	b, err := qrPNG(qr, modules, scale)
	return qrImage{b, "image/png"}, err
}

// qrPNG writes the QR code as a 1-bit grayscale PNG, scale pixels per
// module. By hand, because image/png reads a whole canvas pixel by pixel
// (~40 ms of CPU at 2048 pixels), where a QR code has one distinct pixel
// row per module row: each is packed once and written scale times to the
// zlib stream (~1 ms).
func qrPNG(qr *go_qr.QrCode, modules, scale int) ([]byte, error) {
	side := modules * scale
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(side))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(side))
	ihdr[8], ihdr[9] = 1, 0 // bit depth 1, grayscale; compression, filter, interlace 0
	pngChunk(&buf, "IHDR", ihdr[:])
	var idat bytes.Buffer
	zw, err := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	if err != nil {
		return nil, err
	}
	row := make([]byte, 1+(side+7)/8) // filter byte 0, then pixels, 1 = white
	for my := range modules {
		clear(row)
		for x := range side {
			if !qr.Module(x/scale-qrBorder, my-qrBorder) {
				row[1+x/8] |= 0x80 >> (x % 8)
			}
		}
		for range scale {
			zw.Write(row)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	pngChunk(&buf, "IDAT", idat.Bytes())
	pngChunk(&buf, "IEND", nil)
	return buf.Bytes(), nil
}

func pngChunk(w *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	w.Write(n[:])
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	w.WriteString(typ)
	w.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	w.Write(n[:])
}

// handleQR answers GET /api/v1/links/{id}/qr?format=png|svg&size=N: the
// short link as a QR code.
func (h *Handler) handleQR(ctx *fasthttp.RequestCtx, id []byte) {
	args := ctx.QueryArgs()
	format := string(args.Peek("format"))
	switch format {
	case "":
		format = "png"
	case "png", "svg":
	default:
		writeError(ctx, fasthttp.StatusBadRequest, string(shortener.InvalidParameter), "format must be png or svg")
		return
	}
	size := DefaultQRSize
	if v := args.Peek("size"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < MinQRSize || n > MaxQRSize {
			writeError(ctx, fasthttp.StatusBadRequest, string(shortener.InvalidParameter),
				"size must be an integer from "+strconv.Itoa(MinQRSize)+" to "+strconv.Itoa(MaxQRSize)+" (pixels)")
			return
		}
		size = n
	}
	tctx, cancel := h.timeout()
	defer cancel()
	l, ok := h.getLink(tctx, ctx, id)
	if !ok {
		return
	}
	img, err := h.qr.get(tctx, h.shortURL(ctx, l), format, size)
	if err != nil {
		var de *shortener.Error
		if !errors.As(err, &de) {
			err = &shortener.Error{Code: shortener.Internal, Message: "could not draw the QR code", Err: err}
		}
		h.writeDomainError(ctx, err)
		return
	}
	ctx.Response.Header.SetContentType(img.contentType)
	ctx.Response.Header.Set("Cache-Control", "private, max-age=300")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(img.body)
}
