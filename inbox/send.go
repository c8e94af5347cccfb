package inbox

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxflow/sandboxflow/guard"
)

// How the inbox sends bytes a run made (docs/reviewing.md, "What the code showed"): every such
// response is an attachment, or a picture checked from its own bytes, and never a page.

const (
	// sentCSP is the Content-Security-Policy of every download and picture: a browser that
	// opens one as a document anyway runs nothing of it, loads nothing for it and frames it
	// nowhere.
	sentCSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
	// maxPicturePixels bounds the pictures the inbox draws: a header may claim any size, and a
	// browser allocates what the header says. A larger picture is offered as a download.
	maxPicturePixels = 40_000_000
	// maxNameRunes bounds a download's name.
	maxNameRunes = 120
	// octetStream is the content type of every download the inbox does not name a type for.
	octetStream = "application/octet-stream"
)

// Magic numbers a picture's bytes start with.
var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8, 0xff}
)

// nameTypes are the content types a download has by its name's extension, the short list the
// inbox names; any other is sent as application/octet-stream. A picture's type counts only
// when its bytes are a picture the inbox draws (checkPicture).
var nameTypes = map[string]string{
	".png": guard.MIMEPNG, ".jpg": guard.MIMEJPEG, ".jpeg": guard.MIMEJPEG,
	".csv": "text/csv", ".json": guard.MIMEJSON, ".txt": guard.MIMEText,
}

// picture is a PNG or JPEG the inbox draws, with its size as its header says.
type picture struct {
	Width, Height int
}

// checkPicture returns the size of b as a picture of type mimeType (guard.MIMEPNG or
// guard.MIMEJPEG), or why the inbox does not draw it: its bytes do not start with that
// format's magic, its header does not decode, or it is larger than maxPicturePixels.
func checkPicture(mimeType string, b []byte) (picture, error) {
	var cfg image.Config
	var err error
	switch {
	case mimeType == guard.MIMEPNG && bytes.HasPrefix(b, pngMagic):
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	case mimeType == guard.MIMEJPEG && bytes.HasPrefix(b, jpegMagic):
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case mimeType == guard.MIMEPNG || mimeType == guard.MIMEJPEG:
		return picture{}, fmt.Errorf("its bytes are not a %s picture", kindOf(mimeType))
	default:
		return picture{}, fmt.Errorf("%s is not a picture type the inbox draws", kindOf(mimeType))
	}
	if err != nil {
		return picture{}, fmt.Errorf("its %s header does not decode: %w", kindOf(mimeType), err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxPicturePixels {
		return picture{}, fmt.Errorf("its header claims %dx%d pixels, past the %d megapixels the inbox draws", cfg.Width, cfg.Height, maxPicturePixels/1_000_000)
	}
	return picture{Width: cfg.Width, Height: cfg.Height}, nil
}

// contentType is the type a download named name (already safeName's) holding b is sent as: by
// its extension from nameTypes, a picture's only when b is one the inbox draws, and
// application/octet-stream for everything else.
func contentType(name string, b []byte) string {
	t, ok := nameTypes[strings.ToLower(path.Ext(name))]
	switch {
	case !ok:
		return octetStream
	case t == guard.MIMEPNG || t == guard.MIMEJPEG:
		if _, err := checkPicture(t, b); err != nil {
			return octetStream
		}
	case strings.HasPrefix(t, "text/") && utf8.Valid(b):
		return t + "; charset=utf-8"
	}
	return t
}

// safeName is what a download is named for a name the code wrote: its last element only
// (after the last / or \), letters and digits of any script and . - _ kept, every other
// character (controls, invisible and direction-changing ones, spaces, quotes) as _, no leading
// dot, at most maxNameRunes; "file" when nothing is left.
func safeName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	n := 0
	for _, r := range name {
		if n == maxNameRunes {
			break
		}
		n++
		switch {
		case r == '.' || r == '-' || r == '_':
			b.WriteRune(r)
		case r != utf8.RuneError && !isInvisible(r) && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name = strings.TrimLeft(b.String(), ".")
	if strings.Trim(name, "_") == "" {
		return "file"
	}
	return name
}

// contentDisposition is the Content-Disposition header of a download named name (safeName's)
// as RFC 6266 writes it: filename with the name in ASCII (any other character as _), and
// filename* with it whole, percent-encoded UTF-8.
func contentDisposition(disposition, name string) string {
	ascii := strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`%s; filename="%s"; filename*=UTF-8''%s`, disposition, ascii, url.PathEscape(name))
}

// sendBytes sends b, which a run made or was given, as a download named after name (safeName):
// an attachment whose type is contentType's, or, when inline is asked for, the picture b is
// shown inline; a picture asked for inline that the inbox does not draw is refused (415). Every
// such response carries nosniff and sentCSP.
func sendBytes(w http.ResponseWriter, name string, b []byte, inline bool) {
	name = safeName(name)
	t := contentType(name, b)
	disposition := "attachment"
	if inline {
		if t != guard.MIMEPNG && t != guard.MIMEJPEG {
			http.Error(w, "not a picture the inbox draws: download it", http.StatusUnsupportedMediaType)
			return
		}
		disposition = "inline"
	}
	h := w.Header()
	h.Set("Content-Type", t)
	h.Set("Content-Disposition", contentDisposition(disposition, name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", sentCSP)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// kindOf names a MIME type of guard's for a reader.
func kindOf(mimeType string) string {
	switch mimeType {
	case guard.MIMEPNG:
		return "PNG"
	case guard.MIMEJPEG:
		return "JPEG"
	case guard.MIMESVG:
		return "SVG"
	case guard.MIMEHTML:
		return "HTML"
	case guard.MIMEText:
		return "text"
	case guard.MIMEJSON:
		return "JSON"
	case guard.MIMETable:
		return "table"
	}
	return visible(mimeType)
}

// outputName is the name an output is downloaded as: output-INDEX with its type's extension.
// SVG and HTML get theirs, and are sent as application/octet-stream (contentType).
func outputName(o guard.Output) string {
	ext := map[string]string{guard.MIMEPNG: ".png", guard.MIMEJPEG: ".jpg", guard.MIMESVG: ".svg", guard.MIMEHTML: ".html",
		guard.MIMEText: ".txt", guard.MIMEJSON: ".json", guard.MIMETable: ".json"}[o.MIME]
	if ext == "" {
		ext = ".bin"
	}
	return fmt.Sprintf("output-%d%s", o.Index, ext)
}
