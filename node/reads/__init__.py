"""What a read needs besides the store: how current a copy is (currency), waiting for a copy
to catch up, and the changelog's end offsets."""
