//! Finite fields GF(p^m) for the RAID+ Latin squares (being written).
