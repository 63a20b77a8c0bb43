provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-db"
  location = "westeurope"
}

resource "azurerm_postgresql_flexible_server" "orders" {
  name                          = "psql-orders"
  resource_group_name           = azurerm_resource_group.main.name
  location                      = azurerm_resource_group.main.location
  version                       = "16"
  sku_name                      = "GP_Standard_D2s_v3"
  storage_mb                    = 65536
  administrator_login           = "pgadmin"
  administrator_password        = "ChangeMe-12345!"
  backup_retention_days         = 7
  geo_redundant_backup_enabled  = true
  public_network_access_enabled = false
}
