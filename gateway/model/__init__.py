"""The gateway's vocabulary, used by every room above: errors, rows, cursors, inputs,
timestamps, prices of fields, principals and scan pages."""
