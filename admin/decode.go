package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// decodeBody decodes r's JSON body into v, refusing unknown fields, wrong types, trailing
// data and a body over the limit; an empty body decodes as {}. On failure it has answered
// (400, or 413 for a body too large) and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	err := decodeJSON(r.Body, v)
	if err == nil {
		return true
	}
	if errors.Is(err, errBodyTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return false
	}
	writeError(w, http.StatusBadRequest, err.Error())
	return false
}

func decodeJSON(body io.Reader, v any) error {
	if body == nil {
		return nil
	}
	data, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, tooLarge.Limit)
		}
		return fmt.Errorf("reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if dec.More() {
		return errors.New("malformed JSON body: more than one value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON body: data after the value")
	}
	return nil
}

func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var badID badIDError
	switch {
	case errors.As(err, &badID):
		return badID
	case errors.As(err, &syntax):
		return fmt.Errorf("malformed JSON body at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("wrong JSON type: the body must be an object, not %s", typ.Value)
		}
		return fmt.Errorf("wrong JSON type for field %q: want %s, got %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("malformed JSON body: it ends early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown field %s in the JSON body", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("malformed JSON body: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "an integer"
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return goKind
}

// decodeReason decodes a body {"reason": s} of an action (what: "a discard") and checks that
// it gives a reason; it answers 400 and returns false otherwise.
func decodeReason(w http.ResponseWriter, r *http.Request, what string) (string, bool) {
	var body struct {
		Reason string `json:"reason"`
	}
	if !decodeBody(w, r, &body) {
		return "", false
	}
	if strings.TrimSpace(body.Reason) == "" {
		writeError(w, http.StatusBadRequest, `field "reason" is required: `+what+` says why`)
		return "", false
	}
	return body.Reason, true
}
