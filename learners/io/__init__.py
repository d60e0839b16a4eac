"""Readers for the data formats learnserve trains from (SVMlight/LETOR, idx, CSV, XC)."""
