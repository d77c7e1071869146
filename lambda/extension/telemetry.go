package extension

import (
	"time"
)

// RecordType is the type of a Telemetry API record this extension reads.
type RecordType uint8

// The platform record types (telemetry-schema-reference); anything else,
// including function and extension log lines, is RecordOther.
const (
	RecordOther RecordType = iota
	RecordInitStart
	RecordInitRuntimeDone
	RecordInitReport
	RecordStart
	RecordRuntimeDone
	RecordReport
	RecordExtension
	RecordTelemetrySubscription
	RecordLogsDropped
	RecordRestoreStart
	RecordRestoreRuntimeDone
	RecordRestoreReport
)

var recordTypeNames = [...]string{
	RecordOther:                 "other",
	RecordInitStart:             "platform.initStart",
	RecordInitRuntimeDone:       "platform.initRuntimeDone",
	RecordInitReport:            "platform.initReport",
	RecordStart:                 "platform.start",
	RecordRuntimeDone:           "platform.runtimeDone",
	RecordReport:                "platform.report",
	RecordExtension:             "platform.extension",
	RecordTelemetrySubscription: "platform.telemetrySubscription",
	RecordLogsDropped:           "platform.logsDropped",
	RecordRestoreStart:          "platform.restoreStart",
	RecordRestoreRuntimeDone:    "platform.restoreRuntimeDone",
	RecordRestoreReport:         "platform.restoreReport",
}

func (t RecordType) String() string {
	if int(t) < len(recordTypeNames) {
		return recordTypeNames[t]
	}
	return "other"
}

func recordTypeOf(name []byte) RecordType {
	for t := RecordInitStart; int(t) < len(recordTypeNames); t++ {
		if string(name) == recordTypeNames[t] {
			return t
		}
	}
	return RecordOther
}

// Field names a numeric field of a Record; Record.Has says which were
// present (as JSON numbers) in the record.
type Field uint16

// The numeric fields read from records.
const (
	FieldDuration          Field = 1 << iota // metrics.durationMs
	FieldBilledDuration                      // metrics.billedDurationMs
	FieldMemorySize                          // metrics.memorySizeMB
	FieldMaxMemoryUsed                       // metrics.maxMemoryUsedMB
	FieldInitDuration                        // metrics.initDurationMs
	FieldRestoreDuration                     // metrics.restoreDurationMs
	FieldProducedBytes                       // metrics.producedBytes
	FieldExtensionOverhead                   // spans[name=extensionOverhead].durationMs
	FieldDroppedRecords                      // droppedRecords
	FieldDroppedBytes                        // droppedBytes
)

// Record is one Telemetry API record, decoded into the fields the extension
// uses. Byte slices point into the batch and are valid until the next call
// to Batch.Next.
type Record struct {
	Time     time.Time  // zero when absent or not RFC 3339
	Type     RecordType // RecordOther for unknown types
	TypeName []byte     // the type as sent

	RequestID []byte
	Status    []byte
	Phase     []byte // init, invoke (platform.init*)

	DurationMs          float64
	BilledDurationMs    float64
	MemorySizeMB        float64
	MaxMemoryUsedMB     float64
	InitDurationMs      float64
	RestoreDurationMs   float64
	ProducedBytes       float64
	ExtensionOverheadMs float64
	DroppedRecords      float64
	DroppedBytes        float64

	fields Field
}

// Has reports whether the record carried field f as a number.
func (r *Record) Has(f Field) bool { return r.fields&f != 0 }

func (r *Record) set(f Field, dst *float64, m *member) {
	if v, ok := m.num(); ok {
		*dst = v
		r.fields |= f
	} else {
		*dst = 0
		r.fields &^= f
	}
}

// Batch reads one Telemetry API delivery: a JSON array of
// {"time","type","record"} objects. Array elements that are not objects are
// skipped and counted. It allocates nothing once its scratch space has grown.
//
//	b.Reset(body)
//	for b.Next() { use(b.Record()) }
//	if err := b.Err(); err != nil { … }
type Batch struct {
	it      iter
	rec     Record
	scratch []byte
	skipped int
}

// Reset starts reading data, which must stay unchanged while it is read.
func (b *Batch) Reset(data []byte) {
	b.it = iterate(data, 0)
	if b.it.err == nil && b.it.object {
		b.it.err, b.it.i = errSyntax, len(data) // a batch is an array
	}
	b.skipped = 0
}

// Next decodes the next record; false at the end or on a syntax error.
func (b *Batch) Next() bool {
	for b.it.next() {
		if b.it.m.kind != kindObject {
			b.skipped++
			continue
		}
		b.scratch = b.scratch[:0]
		b.decode(b.it.m.value)
		return true
	}
	return false
}

// Record returns the record Next decoded.
func (b *Batch) Record() *Record { return &b.rec }

// Err returns the syntax error that stopped Next, if any. A batch with a
// syntax error anywhere is junk, though records before the error were read.
func (b *Batch) Err() error { return b.it.err }

// Skipped returns how many array elements were not objects.
func (b *Batch) Skipped() int { return b.skipped }

func (b *Batch) decode(obj []byte) {
	r := &b.rec
	*r = Record{}
	var record member
	it := iterate(obj, 1)
	for it.next() {
		m := &it.m
		switch {
		case m.nameIs("time"):
			r.Time = time.Time{}
			if s, ok := m.str(&b.scratch); ok {
				if t, err := time.Parse(time.RFC3339Nano, string(s)); err == nil {
					r.Time = t
				}
			}
		case m.nameIs("type"):
			r.TypeName, _ = m.str(&b.scratch)
		case m.nameIs("record"):
			record = *m
		}
	}
	r.Type = recordTypeOf(r.TypeName)
	if record.kind != kindObject {
		return
	}
	it = iterate(record.value, 2)
	for it.next() {
		m := &it.m
		switch {
		case m.nameIs("requestId"):
			r.RequestID, _ = m.str(&b.scratch)
		case m.nameIs("status"):
			r.Status, _ = m.str(&b.scratch)
		case m.nameIs("phase"):
			r.Phase, _ = m.str(&b.scratch)
		case m.nameIs("metrics"):
			r.fields &^= FieldDuration | FieldBilledDuration | FieldMemorySize | FieldMaxMemoryUsed |
				FieldInitDuration | FieldRestoreDuration | FieldProducedBytes
			r.DurationMs, r.BilledDurationMs, r.MemorySizeMB, r.MaxMemoryUsedMB = 0, 0, 0, 0
			r.InitDurationMs, r.RestoreDurationMs, r.ProducedBytes = 0, 0, 0
			if m.kind == kindObject {
				b.decodeMetrics(m.value, 3)
			}
		case m.nameIs("spans"):
			r.fields &^= FieldExtensionOverhead
			r.ExtensionOverheadMs = 0
			if m.kind == kindArray {
				b.decodeSpans(m.value, 3)
			}
		case m.nameIs("droppedRecords"):
			r.set(FieldDroppedRecords, &r.DroppedRecords, m)
		case m.nameIs("droppedBytes"):
			r.set(FieldDroppedBytes, &r.DroppedBytes, m)
		}
	}
}

func (b *Batch) decodeMetrics(obj []byte, depth int) {
	r := &b.rec
	it := iterate(obj, depth)
	for it.next() {
		m := &it.m
		switch {
		case m.nameIs("durationMs"):
			r.set(FieldDuration, &r.DurationMs, m)
		case m.nameIs("billedDurationMs"):
			r.set(FieldBilledDuration, &r.BilledDurationMs, m)
		case m.nameIs("memorySizeMB"):
			r.set(FieldMemorySize, &r.MemorySizeMB, m)
		case m.nameIs("maxMemoryUsedMB"):
			r.set(FieldMaxMemoryUsed, &r.MaxMemoryUsedMB, m)
		case m.nameIs("initDurationMs"):
			r.set(FieldInitDuration, &r.InitDurationMs, m)
		case m.nameIs("restoreDurationMs"):
			r.set(FieldRestoreDuration, &r.RestoreDurationMs, m)
		case m.nameIs("producedBytes"):
			r.set(FieldProducedBytes, &r.ProducedBytes, m)
		}
	}
}

// decodeSpans finds the extensionOverhead span (the time the platform
// waited for extensions after the runtime finished); the last one wins.
func (b *Batch) decodeSpans(arr []byte, depth int) {
	r := &b.rec
	it := iterate(arr, depth)
	for it.next() {
		if it.m.kind != kindObject {
			continue
		}
		var isOverhead bool
		var dur member
		span := iterate(it.m.value, depth+1)
		for span.next() {
			m := &span.m
			switch {
			case m.nameIs("name"):
				s, ok := m.str(&b.scratch)
				isOverhead = ok && string(s) == "extensionOverhead"
			case m.nameIs("durationMs"):
				dur = *m
			}
		}
		if isOverhead {
			r.set(FieldExtensionOverhead, &r.ExtensionOverheadMs, &dur)
		}
	}
}
