"""What the SIMT and Tile backends share: scalar types, constant folding, IR
base nodes, the base typer, launch contracts, ownership diagnostics and the
NVPTX conventions. Nothing here imports a language backend."""
