module pmds/lincheck

go 1.21

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/goccy/go-json v0.10.5
)
