package framework

import (
	"context"
	"fmt"
)

// PluginFactory builds a plugin. args is the plugin's own args type from
// the profile, or nil for its defaults.
type PluginFactory func(ctx context.Context, args any, h Handle) (Plugin, error)

// Registry maps plugin names to factories. It is built explicitly (see
// plugins.NewInTreeRegistry); nothing registers itself.
type Registry map[string]PluginFactory

// Register adds a factory; it fails if the name is taken.
func (r Registry) Register(name string, f PluginFactory) error {
	if _, ok := r[name]; ok {
		return fmt.Errorf("framework: plugin %q already registered", name)
	}
	r[name] = f
	return nil
}

// Merge adds every factory of other; it fails on the first name taken.
func (r Registry) Merge(other Registry) error {
	for name, f := range other {
		if err := r.Register(name, f); err != nil {
			return err
		}
	}
	return nil
}
