"""The figure types of mmrag's zero-shot type evaluation, one prompt each: shared by
scripts/eval_figures.py (the reserved real set) and finetune_figenc.py (the dev set)."""
TYPE_PROMPTS = {"bar": "a bar chart", "line": "a line plot", "scatter": "a scatter plot",
                "pie": "a pie chart", "histogram": "a histogram", "surface3d": "a 3D surface plot",
                "diagram": "a diagram of boxes connected by arrows", "table": "a table",
                "photo": "a photograph", "drawing": "a drawing of geometric shapes",
                "text": "an image of text"}
