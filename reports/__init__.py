"""What a person or a CI system reads of runs, from their run directories alone: the HTML run
report (run_report.py), the campaign index with trends across nights (index.py), JUnit XML
(junit.py), and the page's plots and browser check."""
