"""The bpflow Reflex web app (pages, state and wiring)."""
