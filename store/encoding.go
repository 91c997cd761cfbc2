package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// EncodingZstd is the Content-Encoding of every release Publish writes.
// Not gzip: GCS decompresses a gzip object on the way out (decompressive
// transcoding), and the client then skips its CRC32C check; asking for the
// stored bytes is refused on JSON reads, which bucketops uses. GCS serves a
// zstd object as stored, so the CRC32C is checked end to end.
const EncodingZstd = "zstd"

// maxStoredBytes bounds the bytes read from a compressed object: zstd's
// own bound for the largest release (a frame of incompressible data is a
// little larger than the data), so no release bucketops wrote is refused.
const maxStoredBytes = MaxReleaseBytes + MaxReleaseBytes>>8 + 1<<10

// The encoder and decoder are safe for concurrent EncodeAll and DecodeAll
// calls and keep their tables between them; they are made on first use so
// that a process that never publishes or reads pays nothing.
var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder: %v", err)) // only bad options fail
		}
		return e
	})
	decoder = sync.OnceValue(func() *zstd.Decoder {
		// The cap is what makes a small object that inflates to gigabytes
		// (a bomb) fail after MaxReleaseBytes, not after the memory is gone.
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxReleaseBytes))
		if err != nil {
			panic(fmt.Sprintf("zstd decoder: %v", err))
		}
		return d
	})
)

// compress returns what Publish stores for data and its Content-Encoding.
// A tombstone stays empty, with no encoding: deliberately nothing.
func compress(data []byte) ([]byte, string) {
	if len(data) == 0 {
		return nil, ""
	}
	return encoder().EncodeAll(data, make([]byte, 0, len(data)/2)), EncodingZstd
}

// checkEncoding refuses, from a release's attributes alone, an encoding
// bucketops doesn't write, before any byte is read: a gzip object would be
// transcoded by GCS without a CRC32C check, and a damaged one makes the
// client's reader reopen it until the deadline.
func checkEncoding(rel Release) error {
	switch rel.Encoding {
	case "", EncodingZstd:
		return nil
	}
	return fmt.Errorf("%w: the object is stored with Content-Encoding %q, which bucketops never writes (only %q, or none for releases from before compression); it was written behind bucketops' back, publish it again", ErrCorrupt, rel.Encoding, EncodingZstd)
}

// decompress returns the manifest stream stored as raw with encoding
// (checked by checkEncoding), at most MaxReleaseBytes of it.
func decompress(raw []byte, encoding string) ([]byte, error) {
	if encoding == "" {
		return raw, nil
	}
	data, err := decoder().DecodeAll(raw, nil)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, fmt.Errorf("%w: the object's %s stream inflates past %d bytes, which no release does; publish it again", ErrCorrupt, encoding, MaxReleaseBytes)
	case err != nil:
		return nil, fmt.Errorf("%w: the object is not a valid %s stream (%v); publish it again", ErrCorrupt, encoding, err)
	}
	return data, nil
}
