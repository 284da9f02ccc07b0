"""fgrad.nn"""
