"""fgrad.optim"""
