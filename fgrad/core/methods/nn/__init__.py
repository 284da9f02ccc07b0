"""The Tensor's neural-network methods: convolution, pooling, normalization, attention,
losses, dropout, and uint8 image resizing (`NNOpsMixin` assembles them)."""
