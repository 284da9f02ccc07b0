"""fgrad.transforms"""
