"""gsd-research's Python environment, decided in one place (stdlib only, runs on any python3 >= 3.7):

- locate: where an environment may be, in one lookup order, and the plugin's data directory
- verdict: whether it is safe (owners and modes, its interpreter and bin/ too) and ready (its marker), and
  the launcher's JSON envelope when it is not
- build, store, progress: building the plugin's environment from the pinned lock, keeping one per lock
- wait: a launcher's wait for a build in progress
- launch: the launchers' entry; cli: the subcommands (`python3 <root>/bootstrap build|rebuild|status|...`)

Imported by bin/* (through __main__), by the hooks and by the CLI's repair hint."""
