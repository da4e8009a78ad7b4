# Runs before any pack is imported: leaves a marker the pack checks at import.
import os

os.environ["V1_PACK_PRESTARTUP"] = "ran"
