"""What a person looks at: the figures and plots, the HTML report, the terminal tables, and a prediction
logged to wandb."""
