package approval

import (
	"encoding/binary"
	"errors"
	"math/big"
)

// errShort is returned by wireReader when the input ends inside a field.
var errShort = errors.New("truncated")

// wireReader reads the SSH wire encoding of RFC 4251 §5 (uint32 lengths, big-endian).
type wireReader struct {
	b []byte
}

func (r *wireReader) byte() (byte, error) {
	if len(r.b) < 1 {
		return 0, errShort
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v, nil
}

func (r *wireReader) uint32() (uint32, error) {
	if len(r.b) < 4 {
		return 0, errShort
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v, nil
}

func (r *wireReader) fixed(n int) ([]byte, error) {
	if n < 0 || len(r.b) < n {
		return nil, errShort
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v, nil
}

func (r *wireReader) string() ([]byte, error) {
	n, err := r.uint32()
	if err != nil {
		return nil, err
	}
	if uint64(n) > uint64(len(r.b)) {
		return nil, errShort
	}
	return r.fixed(int(n))
}

// mpint reads a non-negative multiple-precision integer (RFC 4251 §5).
func (r *wireReader) mpint() (*big.Int, error) {
	b, err := r.string()
	if err != nil {
		return nil, err
	}
	if len(b) > 0 && b[0]&0x80 != 0 {
		return nil, errors.New("negative mpint")
	}
	return new(big.Int).SetBytes(b), nil
}

func (r *wireReader) empty() bool { return len(r.b) == 0 }

// wireWriter writes the SSH wire encoding.
type wireWriter struct {
	b []byte
}

func (w *wireWriter) byte(v byte) { w.b = append(w.b, v) }

func (w *wireWriter) uint32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }

func (w *wireWriter) raw(v []byte) { w.b = append(w.b, v...) }

func (w *wireWriter) string(v []byte) {
	w.uint32(uint32(len(v)))
	w.b = append(w.b, v...)
}

func (w *wireWriter) mpint(v *big.Int) {
	b := v.Bytes()
	if len(b) > 0 && b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	w.string(b)
}
