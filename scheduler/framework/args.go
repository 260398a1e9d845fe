package framework

import (
	"fmt"
	"reflect"
)

// DecodeArgs turns the args a profile holds for plugin into the plugin's
// own Args type A: nil, a nil *A, A and *A are accepted (nil gives the zero
// value, for the plugin to default); anything else is an error naming both
// types. Every factory shares it, so they accept the same shapes.
func DecodeArgs[A any](plugin string, args any) (A, error) {
	var a A
	switch v := args.(type) {
	case nil:
	case *A:
		if v != nil {
			a = *v
		}
	case A:
		a = v
	default:
		return a, fmt.Errorf("%s: want args of type *%s, got %T", plugin, reflect.TypeFor[A]().Name(), args)
	}
	return a, nil
}
