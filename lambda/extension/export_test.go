package extension

// SetField marks field f of r present or absent (for reference decoders in
// tests).
func SetField(r *Record, f Field, present bool) {
	if present {
		r.fields |= f
	} else {
		r.fields &^= f
	}
}
