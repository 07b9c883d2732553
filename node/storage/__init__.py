"""The LevelDB partition stores: their key layout, batches of changes, retention, and how each
view kind stores its changelog records (`kinds`)."""
