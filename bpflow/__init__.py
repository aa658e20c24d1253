"""bpflow's services around the pure engine: the SQL store (`bpflow.store`), who may do
what (`access`), tokens (`auth`), the person-facing boxes (`interactions`), the worker's
actions (`actions`), the mailbox, the worker, the REST API (`bpflow.api`) and the command
line (`cli`). docs/architecture.md describes the layout."""
