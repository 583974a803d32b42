package podsource

import "context"

// Channel is a source fed by a program: what is sent with Send goes out
// tagged with the channel's name. Pods must carry their UIDs; the Merger
// applies the defaults and validation every source gets.
type Channel struct {
	name string
	in   chan Update
}

// NewChannel returns a channel source; buffer is how many updates Send
// can queue before it blocks.
func NewChannel(name string, buffer int) *Channel {
	return &Channel{name: name, in: make(chan Update, buffer)}
}

// Name implements Source.
func (c *Channel) Name() string { return c.name }

// Send queues an update; it blocks when the buffer is full, until Run
// takes it or ctx ends.
func (c *Channel) Send(ctx context.Context, u Update) error {
	u.Source = c.name
	select {
	case c.in <- u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run implements Source.
func (c *Channel) Run(ctx context.Context, out chan<- Update) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-c.in:
			select {
			case out <- u:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
