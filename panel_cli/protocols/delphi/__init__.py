"""delphi: experts revise round after round, seeing each other's analyses anonymously; a synthesis closes."""
