"""fgrad.lower"""
