provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-app-prod"
  location = "westeurope"

  tags = {
    env = "prod"
  }
}

resource "azurerm_management_lock" "main" {
  name       = "no-delete"
  scope      = azurerm_resource_group.main.id
  lock_level = "CanNotDelete"
  notes      = "Production resources"
}

resource "azurerm_log_analytics_workspace" "main" {
  name                = "law-app-prod"
  location            = azurerm_resource_group.main.location
  resource_group_name = azurerm_resource_group.main.name
  retention_in_days   = 90

  identity {
    type = "SystemAssigned"
  }
}
